"""A model that thinks, for the reasoning tests of every protocol."""

from __future__ import annotations

__all__ = ["THINKING_TEMPLATE", "THOUGHT"]

# A Qwen3-style thinking template (ChatML that opens <think> in the prompt) and a grammar
# that stands in for a model that thinks: the reply is fixed, the parsing is real.
THINKING_TEMPLATE = """\
{%- for m in messages %}
{%- set content = m.content %}
{%- if m.role == 'assistant' and '</think>' in content %}
{%- set content = content.split('</think>')[-1].lstrip('\\n') %}
{%- endif %}
{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}
"""
THOUGHT = 'root ::= "Plan: be brief." "\\n</think>\\n\\n" "Paris is sunny."'
