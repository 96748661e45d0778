"""Model output -> expected message, per chat family, transcribed from llama.cpp's own
tests/test-chat.cpp (vendor/llama.cpp): the ``peg_tester("models/templates/X.jinja")`` blocks of
``test_template_output_peg_parsers`` and ``test_lfm2_parser``. ``line`` is the line of the
``tst.test(`` call there; the tools and canned messages are the file's own (``special_function_tool``,
``message_assist_call``, ...), written out as OpenAI tool dicts and plain strings.

The C++ harness (``test_peg_parser``) renders the template for ``{message_user}`` with
add_generation_prompt, reasoning_format NONE, tool_choice AUTO, parallel_tool_calls false and
enable_thinking true unless the case sets them, then parses ``input``; it compares content and
reasoning with surrounding whitespace stripped, and tool calls by name, arguments (as JSON) and id.

Not taken: the ``is_partial(true)`` cases (a reply cut off mid-call: there is no final answer for
a reader to give). The continuation cases set ``continue_final_message`` to CONTENT or REASONING
explicitly; an OpenAI body continues its trailing assistant message in llama-server's automatic
mode instead, which resolves to that same mode for the two canned prefills, so the few taken here
are expressed that way (``prefill``). Apertus has only two parser cases in test-chat.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MESSAGE_USER = "Hey there!"  # message_user


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _integer(description: str) -> dict[str, Any]:
    return {"type": "integer", "description": description}


# test-chat.cpp's tools (static common_chat_tool ...), keyed by the name a case uses
TOOLS: dict[str, dict[str, Any]] = {
    "special_function": _tool(
        "special_function", "I'm special", _object({"arg1": _integer("The arg.")}, ["arg1"])
    ),
    "special_function_with_opt": _tool(
        "special_function_with_opt",
        "I'm special but have optional stuff",
        _object(
            {"arg1": _integer("The arg."), "arg2": _integer("The optional arg.")},
            ["arg1"],
        ),
    ),
    "empty_args": _tool("empty_args", "A tool that takes no arguments", _object({})),
    "python": _tool(
        "python",
        "an ipython interpreter",
        _object({"code": _string("Python code to execute.")}, ["code"]),
    ),
    "html": _tool(
        "html",
        "an html validator",
        _object({"markup": _string("HTML markup to validate.")}, ["markup"]),
    ),
    "get_time": _tool(
        "get_time",
        "Get the current time in a city",
        _object({"city": _string("City name")}, ["city"]),
    ),
    "get_weather": _tool(
        "get_weather",
        "Get the current weather in a city",
        _object({"city": _string("City name")}, ["city"]),
    ),
    "todo_list": _tool(
        "todo_list",
        "Create or update the todo list",
        _object({"todos": {"type": "array", "description": "List of TODO list items"}}, ["todos"]),
    ),
    "edit": _tool(
        "edit",
        "Edit file",
        _object(
            {
                "filename": _string("Path of file to edit"),
                "oldString": _string("String to replace"),
                "newString": _string("New (replacement) value"),
            },
            ["filename", "oldString", "newString"],
        ),
    ),
    "run_in_terminal": _tool(
        "run_in_terminal",
        "Run a shell command.",
        _object({"command": _string("Shell command to run")}, ["command"]),
    ),
    # GPT-OSS "Complex tool calling" (line 6494) declares its own edit tool
    "edit_gpt_oss": _tool(
        "edit",
        "Edit a file",
        _object(
            {
                "oldString": _string("Old string to replace."),
                "newString": _string("New replacement string."),
                "replaceAll": {
                    "type": "boolean",
                    "description": "Whether to replace all occurrences.",
                },
            },
            ["oldString", "newString"],
        ),
    ),
    # GLM-4.7-Flash #20650 (line 4464)
    "read_file_diff_md": _tool(
        "read_file_diff_md",
        "Reads a file diff",
        {
            "type": "object",
            "properties": {"review_id": {"type": "string"}, "file_id": {"type": "string"}},
        },
    ),
}

# invoice_schema of test_template_output_peg_parsers
INVOICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"amount": {"type": "number"}, "date": {"type": "string"}},
}
# const_schema
CONST_SCHEMA: dict[str, Any] = {"const": "42"}


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str  # JSON text, compared parsed
    id: str | None = None  # checked only when set


@dataclass(frozen=True)
class Case:
    family: str
    line: int  # of the tst.test( call in vendor/llama.cpp/tests/test-chat.cpp
    template: str  # file under vendor/llama.cpp/models/templates
    input: str
    tools: tuple[str, ...] = ()  # keys of TOOLS
    reasoning_format: str = "none"  # common_reasoning_format_name
    parallel_tool_calls: bool = False
    enable_thinking: bool | None = None  # None: the case leaves the harness default (true)
    tool_choice: str | None = None  # None: auto
    json_schema: dict[str, Any] | None = None  # .json_schema(...): a response_format here
    prefill: dict[str, Any] | None = None  # a trailing assistant message to continue
    content: str = ""
    reasoning_content: str = ""
    tool_calls: tuple[Call, ...] = field(default=())


# canned messages of test-chat.cpp
ASSIST = "Hello, world!\nWhat's up?"  # message_assist
THINKING = "I'm\nthinking"  # message_assist_thoughts' reasoning
CALL = Call("special_function", '{"arg1": 1}')  # message_assist_call
CALL_OPT = Call("special_function_with_opt", '{"arg1": 1, "arg2": 2}')
# message_assist_prefill_content / message_assist_prefill_reasoning as OpenAI messages
PREFILL_CONTENT: dict[str, Any] = {
    "role": "assistant",
    "content": "Hello, ",
    "reasoning_content": "I'm thinking",
}
PREFILL_REASONING: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": "I'm"}

# DeepSeek's full-width markers
DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"  # noqa: RUF001
DS_CALLS_END = "<｜tool▁calls▁end｜>"  # noqa: RUF001
DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"  # noqa: RUF001
DS_CALL_END = "<｜tool▁call▁end｜>"  # noqa: RUF001
DS_SEP = "<｜tool▁sep｜>"  # noqa: RUF001

QWEN_CALL = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>"
QWEN_CALL_OPT = (
    "<tool_call>\n<function=special_function_with_opt>\n"
    "<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>"
)
KIMI_CALL = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0"
    '<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_calls_section_end|>'
)
KIMI_CALL_ID = Call("special_function", '{"arg1": 1}', "functions.special_function:0")
R7B_ACTION = (
    "<|START_ACTION|>[\n"
    '    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n'
    "]<|END_ACTION|>"
)
GLM47_CALL = (
    "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>"
)
SEED_CALL = (
    "<seed:tool_call>\n<function=special_function>\n<parameter=arg1>1</parameter>\n"
    "</function>\n</seed:tool_call>"
)
PY_HELLO = (
    "<tool_call>\n<function=python>\n<parameter=code>\n"
    'def hello():\n    print("Hello, world!")\n\nhello()\n'
    "</parameter>\n</function>\n</tool_call>"
)
PY_HELLO_ARGS = '{"code": "def hello():\\n    print(\\"Hello, world!\\")\\n\\nhello()"}'

QWEN3_CODER = "Qwen3-Coder.jinja"
GPT_OSS = "openai-gpt-oss-120b.jinja"
GLM46 = "GLM-4.6.jinja"
GLM47 = "GLM-4.7-Flash.jinja"
KIMI_THINKING = "Kimi-K2-Thinking.jinja"
KIMI_K2 = "moonshotai-Kimi-K2.jinja"
MINIMAX = "MiniMax-M2.jinja"
DSV31 = "deepseek-ai-DeepSeek-V3.1.jinja"
R1_LLAMA = "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"
R1_QWEN = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
R1_LCPP = "llama-cpp-deepseek-r1.jinja"
HERMES = "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"
LLAMA31 = "meta-llama-Llama-3.1-8B-Instruct.jinja"
LLAMA32 = "meta-llama-Llama-3.2-3B-Instruct.jinja"
LLAMA33 = "meta-llama-Llama-3.3-70B-Instruct.jinja"
NEMO = "mistralai-Mistral-Nemo-Instruct-2407.jinja"
FUNCTIONARY = "meetkai-functionary-medium-v3.2.jinja"
R7B = "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"
GRANITE33 = "ibm-granite-granite-3.3-2B-Instruct.jinja"
GRANITE40 = "ibm-granite-granite-4.0.jinja"
GRANITE41 = "ibm-granite-granite-4.1.jinja"
GEMMA4 = "google-gemma-4-31B-it.jinja"
LFM2 = "LFM2-8B-A1B.jinja"
LFM25 = "LFM2.5-8B-A1B.jinja"
SEED = "ByteDance-Seed-OSS.jinja"
NEMOTRON_V2 = "NVIDIA-Nemotron-Nano-v2.jinja"
NEMOTRON3 = "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"
APERTUS = "Apertus-8B-Instruct.jinja"
APRIEL15 = "unsloth-Apriel-1.5.jinja"
APRIEL16 = "Apriel-1.6-15b-Thinker-fixed.jinja"
QWEN35 = "Qwen3.5-4B.jinja"
MINISTRAL = "mistralai-Ministral-3-14B-Reasoning-2512.jinja"

SF = ("special_function",)
SF_OPT = ("special_function", "special_function_with_opt")

CASES: list[Case] = [
    # --- Qwen3-Coder ---
    # 3554: plain content
    Case("qwen3-coder", 3554, QWEN3_CODER, ASSIST, content=ASSIST),
    # 3556: one call
    Case("qwen3-coder", 3556, QWEN3_CODER, QWEN_CALL, SF, tool_calls=(CALL,)),
    # 3581: content, then a call without its opening <tool_call>
    Case(
        "qwen3-coder",
        3581,
        QWEN3_CODER,
        "Let me call it.\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
        "</function>\n</tool_call>",
        SF,
        content="Let me call it.\n",
        tool_calls=(CALL,),
    ),
    # 3624: two calls in parallel
    Case(
        "qwen3-coder",
        3624,
        QWEN3_CODER,
        QWEN_CALL + "\n" + QWEN_CALL_OPT,
        SF_OPT,
        parallel_tool_calls=True,
        tool_calls=(CALL, CALL_OPT),
    ),
    # 3654: multiline code argument
    Case(
        "qwen3-coder",
        3654,
        QWEN3_CODER,
        PY_HELLO,
        ("python",),
        tool_calls=(Call("python", PY_HELLO_ARGS),),
    ),
    # 3675: a CJK character in the argument
    Case(
        "qwen3-coder",
        3675,
        QWEN3_CODER,
        "<tool_call>\n<function=python>\n<parameter=code>\n格\n</parameter>\n</function>\n</tool_call>",
        ("python",),
        tool_calls=(Call("python", '{"code": "格"}'),),
    ),
    # --- GPT-OSS ---
    # 6428: final channel
    Case("gpt-oss", 6428, GPT_OSS, "<|channel|>final<|message|>" + ASSIST, content=ASSIST),
    # 6434: analysis (reasoning) then final
    Case(
        "gpt-oss",
        6434,
        GPT_OSS,
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final"
        "<|message|>" + ASSIST,
        reasoning_format="auto",
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 6442: the same with reasoning_format none: the analysis stays in the content
    Case(
        "gpt-oss",
        6442,
        GPT_OSS,
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final"
        "<|message|>" + ASSIST,
        reasoning_format="none",
        content="<|channel|>analysis<|message|>I'm\nthinking<|end|>" + ASSIST,
    ),
    # 6457: recipient in the role header
    Case(
        "gpt-oss",
        6457,
        GPT_OSS,
        ' to=functions.special_function<|channel|>analysis<|message|>{"arg1": 1}',
        SF,
        reasoning_format="auto",
        tool_calls=(CALL,),
    ),
    # 6485: reasoning, then a call
    Case(
        "gpt-oss",
        6485,
        GPT_OSS,
        "<|channel|>analysis<|message|>I'm\nthinking<|end|>"
        '<|start|>assistant to=functions.special_function<|channel|>analysis<|message|>{"arg1": 1}',
        SF,
        reasoning_format="auto",
        reasoning_content=THINKING,
        tool_calls=(CALL,),
    ),
    # 6494: complex call in the commentary channel with <|constrain|>json
    Case(
        "gpt-oss",
        6494,
        GPT_OSS,
        "<|channel|>analysis<|message|>Thinking about edit...<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json"
        '<|message|>{"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", '
        '"replaceAll": false}',
        ("edit_gpt_oss",),
        reasoning_format="auto",
        reasoning_content="Thinking about edit...",
        tool_calls=(
            Call(
                "edit",
                '{"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", '
                '"replaceAll": false}',
            ),
        ),
    ),
    # --- GLM-4.6 / GLM-4.7-Flash ---
    # 4389: GLM-4.6 call
    Case(
        "glm",
        4389,
        GLM46,
        "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
        SF,
        tool_calls=(CALL,),
    ),
    # 4404: GLM-4.7-Flash content, thinking off
    Case("glm", 4404, GLM47, ASSIST, enable_thinking=False, content=ASSIST),
    # 4411: reasoning (forced open) and content
    Case(
        "glm",
        4411,
        GLM47,
        "I'm\nthinking</think>" + ASSIST,
        reasoning_format="deepseek",
        enable_thinking=True,
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 4419: call, thinking off
    Case("glm", 4419, GLM47, GLM47_CALL, SF, enable_thinking=False, tool_calls=(CALL,)),
    # 4430: reasoning then call
    Case(
        "glm",
        4430,
        GLM47,
        "I'm\nthinking</think>" + GLM47_CALL,
        SF,
        reasoning_format="deepseek",
        enable_thinking=True,
        reasoning_content=THINKING,
        tool_calls=(CALL,),
    ),
    # 4442: two calls in parallel
    Case(
        "glm",
        4442,
        GLM47,
        GLM47_CALL + "<tool_call>special_function_with_opt<arg_key>arg1</arg_key><arg_value>1"
        "</arg_value><arg_key>arg2</arg_key><arg_value>2</arg_value></tool_call>",
        SF_OPT,
        parallel_tool_calls=True,
        enable_thinking=False,
        tool_calls=(CALL, CALL_OPT),
    ),
    # 4468: a call with no argument tags (#20650)
    Case(
        "glm",
        4468,
        GLM47,
        "Let me read the diff content.</think><tool_call>read_file_diff_md</tool_call>",
        ("read_file_diff_md",),
        reasoning_format="deepseek",
        enable_thinking=True,
        reasoning_content="Let me read the diff content.",
        tool_calls=(Call("read_file_diff_md", "{}"),),
    ),
    # --- Kimi-K2 ---
    # 4971: Kimi-K2-Thinking content
    Case("kimi-k2", 4971, KIMI_THINKING, ASSIST, content=ASSIST),
    # 4974: a call whose id names the function
    Case("kimi-k2", 4974, KIMI_THINKING, KIMI_CALL, SF, tool_calls=(KIMI_CALL_ID,)),
    # 4982: reasoning then a call
    Case(
        "kimi-k2",
        4982,
        KIMI_THINKING,
        "<think>I'm thinking about this</think>" + KIMI_CALL,
        SF,
        reasoning_format="auto",
        reasoning_content="I'm thinking about this",
        tool_calls=(KIMI_CALL_ID,),
    ),
    # 4992: content then a call
    Case(
        "kimi-k2",
        4992,
        KIMI_THINKING,
        ASSIST + KIMI_CALL,
        SF,
        content=ASSIST,
        tool_calls=(KIMI_CALL_ID,),
    ),
    # 5018: reasoning then two calls
    Case(
        "kimi-k2",
        5018,
        KIMI_THINKING,
        "<think>I need to call two functions</think><|tool_calls_section_begin|>"
        "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>"
        '{"arg1": 1}<|tool_call_end|>'
        "<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>"
        '{"code": "print(\'hey\')"}<|tool_call_end|><|tool_calls_section_end|>',
        ("special_function", "python"),
        reasoning_format="auto",
        parallel_tool_calls=True,
        reasoning_content="I need to call two functions",
        tool_calls=(
            KIMI_CALL_ID,
            Call("python", '{"code": "print(\'hey\')"}', "functions.python:1"),
        ),
    ),
    # 5084: the calls inside the thinking block
    Case(
        "kimi-k2",
        5084,
        KIMI_THINKING,
        "<think>I need to call two functions<|tool_calls_section_begin|>"
        "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>"
        '{"arg1": 1}<|tool_call_end|>'
        "<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>"
        '{"code": "print(\'hey\')"}<|tool_call_end|><|tool_calls_section_end|>',
        ("special_function", "python"),
        reasoning_format="auto",
        parallel_tool_calls=True,
        reasoning_content="I need to call two functions",
        tool_calls=(
            KIMI_CALL_ID,
            Call("python", '{"code": "print(\'hey\')"}', "functions.python:1"),
        ),
    ),
    # 5186: moonshotai-Kimi-K2 (the old template) call
    Case("kimi-k2", 5186, KIMI_K2, KIMI_CALL, SF, tool_calls=(KIMI_CALL_ID,)),
    # --- MiniMax-M2 ---
    # 5443: empty reasoning, content
    Case(
        "minimax-m2",
        5443,
        MINIMAX,
        "\n</think>\n\n" + ASSIST,
        reasoning_format="auto",
        enable_thinking=True,
        content=ASSIST,
    ),
    # 5445: reasoning and content
    Case(
        "minimax-m2",
        5445,
        MINIMAX,
        "I'm\nthinking\n</think>\n\n" + ASSIST,
        reasoning_format="auto",
        enable_thinking=True,
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 5447: reasoning, then a call without arguments
    Case(
        "minimax-m2",
        5447,
        MINIMAX,
        'Let\'s call a tool:\n</think>\n\n<minimax:tool_call>\n<invoke name="empty_args">\n'
        "</invoke>\n</minimax:tool_call>",
        ("empty_args",),
        reasoning_format="auto",
        enable_thinking=True,
        reasoning_content="Let's call a tool:",
        tool_calls=(Call("empty_args", "{}"),),
    ),
    # 5454: a call with a parameter, reasoning_format deepseek
    Case(
        "minimax-m2",
        5454,
        MINIMAX,
        '\n</think>\n\n<minimax:tool_call>\n<invoke name="special_function">\n<parameter '
        'name="arg1">1</parameter>\n</invoke>\n</minimax:tool_call>',
        SF,
        reasoning_format="deepseek",
        tool_calls=(CALL,),
    ),
    # --- DeepSeek V3.1 ---
    # 3920: a call, thinking off
    Case(
        "deepseek-v3.1",
        3920,
        DSV31,
        DS_CALLS_BEGIN
        + DS_CALL_BEGIN
        + "get_time"
        + DS_SEP
        + '{"city": "XYZCITY"}'
        + DS_CALL_END
        + DS_CALLS_END,
        ("get_time",),
        reasoning_format="deepseek",
        enable_thinking=False,
        tool_calls=(Call("get_time", '{"city":"XYZCITY"}'),),
    ),
    # 3953: reasoning then a call
    Case(
        "deepseek-v3.1",
        3953,
        DSV31,
        "REASONING</think>"
        + DS_CALLS_BEGIN
        + DS_CALL_BEGIN
        + "get_time"
        + DS_SEP
        + '{"city": "Tokyo"}'
        + DS_CALL_END
        + DS_CALLS_END,
        ("get_time",),
        reasoning_format="deepseek",
        enable_thinking=True,
        reasoning_content="REASONING",
        tool_calls=(Call("get_time", '{"city":"Tokyo"}'),),
    ),
    # 3965: reasoning, content, two calls
    Case(
        "deepseek-v3.1",
        3965,
        DSV31,
        "REASONING</think>CONTENT"
        + DS_CALLS_BEGIN
        + DS_CALL_BEGIN
        + "get_time"
        + DS_SEP
        + '{"city": "Paris"}'
        + DS_CALL_END
        + DS_CALL_BEGIN
        + "get_weather"
        + DS_SEP
        + '{"city": "Paris"}'
        + DS_CALL_END
        + DS_CALLS_END,
        ("get_time", "get_weather"),
        reasoning_format="deepseek",
        parallel_tool_calls=True,
        enable_thinking=True,
        content="CONTENT",
        reasoning_content="REASONING",
        tool_calls=(Call("get_time", '{"city":"Paris"}'), Call("get_weather", '{"city":"Paris"}')),
    ),
    # 3983: reasoning and content
    Case(
        "deepseek-v3.1",
        3983,
        DSV31,
        "REASONING</think>\nCONTENT",
        reasoning_format="deepseek",
        enable_thinking=True,
        content="CONTENT",
        reasoning_content="REASONING\n",
    ),
    # 3992: content, thinking off
    Case(
        "deepseek-v3.1",
        3992,
        DSV31,
        "CONTENT",
        reasoning_format="deepseek",
        enable_thinking=False,
        content="CONTENT",
    ),
    # --- DeepSeek R1 ---
    # 5990: R1 Distill Llama, empty reasoning
    Case(
        "deepseek-r1",
        5990,
        R1_LLAMA,
        "</think>" + ASSIST,
        reasoning_format="deepseek",
        content=ASSIST,
    ),
    # 5994: R1 Distill Llama, reasoning and content
    Case(
        "deepseek-r1",
        5994,
        R1_LLAMA,
        "I'm\nthinking</think>" + ASSIST,
        reasoning_format="deepseek",
        enable_thinking=True,
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 6025: llama-cpp-deepseek-r1, reasoning and content
    Case(
        "deepseek-r1",
        6025,
        R1_LCPP,
        "I'm\nthinking</think>" + ASSIST,
        reasoning_format="deepseek",
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 6029: llama-cpp-deepseek-r1, a call in a json block
    Case(
        "deepseek-r1",
        6029,
        R1_LCPP,
        "</think>" + DS_CALLS_BEGIN + DS_CALL_BEGIN + "function" + DS_SEP + "special_function\n"
        '```json\n{"arg1": 1}```' + DS_CALL_END + DS_CALLS_END,
        SF,
        reasoning_format="deepseek",
        parallel_tool_calls=True,
        tool_calls=(CALL,),
    ),
    # 6070: R1 Distill Qwen, a call with thinking off
    Case(
        "deepseek-r1",
        6070,
        R1_QWEN,
        DS_CALLS_BEGIN + DS_CALL_BEGIN + "function" + DS_SEP + "special_function\n"
        '```json\n{"arg1": 1}```' + DS_CALL_END + DS_CALLS_END,
        SF,
        reasoning_format="deepseek",
        enable_thinking=False,
        tool_calls=(CALL,),
    ),
    # --- Hermes 2 Pro ---
    # 3332: a call
    Case(
        "hermes-2-pro",
        3332,
        HERMES,
        '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>',
        SF,
        tool_calls=(CALL,),
    ),
    # 3340: content then a call (message_assist_call_content)
    Case(
        "hermes-2-pro",
        3340,
        HERMES,
        ASSIST + '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>',
        SF,
        content=ASSIST,
        tool_calls=(Call("special_function", '{"arg1":1}'),),
    ),
    # 3352: continuing a prefilled assistant message
    Case(
        "hermes-2-pro",
        3352,
        HERMES,
        "world!\nWhat's up?",
        prefill=PREFILL_CONTENT,
        content=ASSIST,
    ),
    # --- Llama 3.x (test-chat.cpp has no Llama 3 tool-call parse case) ---
    # 6300: Llama 3.1 content with a tool offered
    Case("llama-3", 6300, LLAMA31, ASSIST, SF, content=ASSIST),
    # 6302: Llama 3.1 response format, fenced
    Case(
        "llama-3",
        6302,
        LLAMA31,
        '```json\n"42"\n```',
        reasoning_format="auto",
        json_schema=CONST_SCHEMA,
        content='"42"',
    ),
    # 6309: Llama 3.1 response format, bare
    Case(
        "llama-3",
        6309,
        LLAMA31,
        '"42"\n',
        reasoning_format="auto",
        json_schema=CONST_SCHEMA,
        content='"42"',
    ),
    # 6317: Llama 3.1 continuation
    Case("llama-3", 6317, LLAMA31, "world!\nWhat's up?", prefill=PREFILL_CONTENT, content=ASSIST),
    # 6328: Llama 3.2 content with a tool offered
    Case("llama-3", 6328, LLAMA32, ASSIST, SF, content=ASSIST),
    # 6342: Llama 3.3 content with the python tool offered
    Case("llama-3", 6342, LLAMA33, ASSIST, ("python",), content=ASSIST),
    # --- Mistral Nemo ---
    # 5916: content
    Case("mistral-nemo", 5916, NEMO, ASSIST, content=ASSIST),
    # 5917: a call with its id (message_assist_call_id)
    Case(
        "mistral-nemo",
        5917,
        NEMO,
        '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]',
        SF,
        tool_calls=(Call("special_function", '{"arg1":1}', "123456789"),),
    ),
    # 5924: continuation
    Case("mistral-nemo", 5924, NEMO, "world!\nWhat's up?", prefill=PREFILL_CONTENT, content=ASSIST),
    # --- Functionary v3.2 ---
    # 5951: content to "all"
    Case("functionary-v3.2", 5951, FUNCTIONARY, "all\n" + ASSIST, content=ASSIST),
    # 5952: a call
    Case(
        "functionary-v3.2",
        5952,
        FUNCTIONARY,
        'special_function\n{"arg1": 1}',
        SF,
        tool_calls=(CALL,),
    ),
    # 5959: continuation
    Case(
        "functionary-v3.2",
        5959,
        FUNCTIONARY,
        "world!\nWhat's up?",
        prefill=PREFILL_CONTENT,
        content=ASSIST,
    ),
    # --- Command R7B ---
    # 2822: response block
    Case(
        "command-r7b",
        2822,
        R7B,
        "<|START_RESPONSE|>" + ASSIST + "<|END_RESPONSE|>",
        content=ASSIST,
    ),
    # 2824: thinking and response, reasoning_format deepseek
    Case(
        "command-r7b",
        2824,
        R7B,
        "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_RESPONSE|>"
        + ASSIST
        + "<|END_RESPONSE|>",
        reasoning_format="deepseek",
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 2831: the same with reasoning_format none (message_assist_thoughts_unparsed_r7b)
    Case(
        "command-r7b",
        2831,
        R7B,
        "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_RESPONSE|>"
        + ASSIST
        + "<|END_RESPONSE|>",
        content="<|START_THINKING|>I'm\nthinking<|END_THINKING|>" + ASSIST,
    ),
    # 2837: thinking then an action (message_assist_thoughts_call_idx)
    Case(
        "command-r7b",
        2837,
        R7B,
        "<|START_THINKING|>I'm\nthinking<|END_THINKING|>" + R7B_ACTION,
        SF,
        reasoning_format="deepseek",
        reasoning_content=THINKING,
        tool_calls=(Call("special_function", '{"arg1": 1}', "0"),),
    ),
    # 2857: empty thinking then an action (message_assist_call_idx)
    Case(
        "command-r7b",
        2857,
        R7B,
        "<|START_THINKING|><|END_THINKING|>" + R7B_ACTION,
        SF,
        reasoning_format="deepseek",
        tool_calls=(Call("special_function", '{"arg1":1}', "0"),),
    ),
    # --- Granite ---
    # 3369: Granite 3.3 content
    Case("granite", 3369, GRANITE33, ASSIST, content=ASSIST),
    # 3371: Granite 3.3 reasoning
    Case(
        "granite",
        3371,
        GRANITE33,
        "<think>I'm\nthinking</think>" + ASSIST,
        reasoning_format="deepseek",
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 3383: Granite 3.3 continuation of a prefill with reasoning
    Case(
        "granite",
        3383,
        GRANITE33,
        "world!\nWhat's up?",
        reasoning_format="deepseek",
        enable_thinking=True,
        prefill=PREFILL_CONTENT,
        content=ASSIST,
        reasoning_content="I'm thinking",
    ),
    # 3411: Granite 4.0 call
    Case(
        "granite",
        3411,
        GRANITE40,
        '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>',
        SF,
        tool_calls=(CALL,),
    ),
    # 3434: Granite 4.1 call
    Case(
        "granite",
        3434,
        GRANITE41,
        '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>',
        SF,
        tool_calls=(CALL,),
    ),
    # --- Gemma 4 ---
    # 2997: reasoning and content
    Case(
        "gemma-4",
        2997,
        GEMMA4,
        "<|channel>thought\nI'm\nthinking<channel|>" + ASSIST,
        reasoning_format="auto",
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 3004: empty reasoning
    Case(
        "gemma-4",
        3004,
        GEMMA4,
        "<|channel>thought<channel|>" + ASSIST,
        reasoning_format="auto",
        content=ASSIST,
    ),
    # 3011: reasoning_format none keeps the thought in the content
    Case(
        "gemma-4",
        3011,
        GEMMA4,
        "<|channel>thought\nI'm\nthinking<channel|>" + ASSIST,
        reasoning_format="none",
        content="<|channel>thought\nI'm\nthinking<channel|>" + ASSIST,
    ),
    # 3018: a call with a string argument
    Case(
        "gemma-4",
        3018,
        GEMMA4,
        '<|tool_call>call:get_time{city:<|"|>London<|"|>}<tool_call|>',
        ("get_time",),
        tool_calls=(Call("get_time", '{"city": "London"}'),),
    ),
    # 3039: content then a call
    Case(
        "gemma-4",
        3039,
        GEMMA4,
        ASSIST + '<|tool_call>call:get_time{city:<|"|>Paris<|"|>}<tool_call|>',
        ("get_time",),
        content=ASSIST,
        tool_calls=(Call("get_time", '{"city": "Paris"}'),),
    ),
    # 3054: required call after reasoning
    Case(
        "gemma-4",
        3054,
        GEMMA4,
        "<|channel>thought\nI'm\nthinking<channel|>"
        '<|tool_call>call:get_time{city:<|"|>Paris<|"|>}<tool_call|>',
        ("get_time",),
        reasoning_format="auto",
        tool_choice="required",
        reasoning_content=THINKING,
        tool_calls=(Call("get_time", '{"city": "Paris"}'),),
    ),
    # --- LFM2 ---
    # 2019 (LFM2-8B-A1B): content
    Case("lfm2", 2019, LFM2, ASSIST, content=ASSIST),
    # 2022: a call
    Case(
        "lfm2",
        2022,
        LFM2,
        "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>",
        SF,
        tool_calls=(CALL,),
    ),
    # 2028: a string argument
    Case(
        "lfm2",
        2028,
        LFM2,
        '<|tool_call_start|>[get_time(city="XYZCITY")]<|tool_call_end|>',
        ("get_time",),
        tool_calls=(Call("get_time", '{"city":"XYZCITY"}'),),
    ),
    # 2098: content then a call
    Case(
        "lfm2",
        2098,
        LFM2,
        'Let me check the time.<|tool_call_start|>[get_time(city="Paris")]<|tool_call_end|>',
        ("get_time",),
        content="Let me check the time.",
        tool_calls=(Call("get_time", '{"city":"Paris"}'),),
    ),
    # 2106: two calls in one list
    Case(
        "lfm2",
        2106,
        LFM2,
        "<|tool_call_start|>[special_function(arg1=1), special_function_with_opt(arg1=1, arg2=2)]"
        "<|tool_call_end|>",
        SF_OPT,
        parallel_tool_calls=True,
        tool_calls=(CALL, CALL_OPT),
    ),
    # 5242 (LFM2.5-8B-A1B): reasoning then a call
    Case(
        "lfm2",
        5242,
        LFM25,
        "<think>I'm\nthinking</think><|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>",
        SF,
        reasoning_format="auto",
        reasoning_content=THINKING,
        tool_calls=(Call("special_function", '{"arg1":1}'),),
    ),
    # 5249 (LFM2.5-8B-A1B): reasoning, content, a call
    Case(
        "lfm2",
        5249,
        LFM25,
        "<think>I need to call a function</think>"
        'Let me check the time.<|tool_call_start|>[get_time(city="Paris")]<|tool_call_end|>',
        ("get_time",),
        reasoning_format="auto",
        content="Let me check the time.",
        reasoning_content="I need to call a function",
        tool_calls=(Call("get_time", '{"city":"Paris"}'),),
    ),
    # --- Seed-OSS ---
    # 3447: content
    Case("seed-oss", 3447, SEED, ASSIST, content=ASSIST),
    # 3449: reasoning and content
    Case(
        "seed-oss",
        3449,
        SEED,
        "<seed:think>I'm thinking about the answer</seed:think>\nHello, world!",
        reasoning_format="deepseek",
        content="Hello, world!",
        reasoning_content="I'm thinking about the answer",
    ),
    # 3454: a call
    Case("seed-oss", 3454, SEED, SEED_CALL, SF, tool_calls=(CALL,)),
    # 3464: two calls in parallel
    Case(
        "seed-oss",
        3464,
        SEED,
        SEED_CALL + "\n<seed:tool_call>\n<function=special_function_with_opt>\n"
        "<parameter=arg1>1</parameter>\n<parameter=arg2>2</parameter>\n</function>\n"
        "</seed:tool_call>",
        SF_OPT,
        parallel_tool_calls=True,
        tool_calls=(CALL, CALL_OPT),
    ),
    # 3501: string arguments with quotes and newlines
    Case(
        "seed-oss",
        3501,
        SEED,
        "<seed:tool_call>\n<function=edit>\n<parameter=filename>foo.cpp</parameter>\n"
        '<parameter=oldString>def foo(arg = "14"):\n    return arg + "bar"\n</parameter>\n'
        '<parameter=newString>def foo(arg = "15"):\n    pass\n</parameter>\n'
        "</function>\n</seed:tool_call>",
        ("edit",),
        tool_calls=(
            Call(
                "edit",
                '{"filename": "foo.cpp", '
                '"oldString": "def foo(arg = \\"14\\"):\\n    return arg + \\"bar\\"\\n", '
                '"newString": "def foo(arg = \\"15\\"):\\n    pass\\n"}',
            ),
        ),
    ),
    # --- Nemotron (Nano v2, 3 Nano) ---
    # 5852: Nano v2 reasoning then a call
    Case(
        "nemotron",
        5852,
        NEMOTRON_V2,
        "I'm\nthinking\n</think>\n"
        '<TOOLCALL>[{"name": "special_function", "arguments": {"arg1": 1}}]</TOOLCALL>',
        SF,
        reasoning_format="auto",
        reasoning_content=THINKING,
        tool_calls=(CALL,),
    ),
    # 5858: Nano v2, blank lines around the call
    Case(
        "nemotron",
        5858,
        NEMOTRON_V2,
        "I'm\nthinking\n</think>\n\n"
        '<TOOLCALL>[{"name": "special_function", "arguments": {"arg1": 1}}]</TOOLCALL>\n',
        SF,
        reasoning_format="auto",
        reasoning_content=THINKING,
        tool_calls=(CALL,),
    ),
    # 2699: 3 Nano content, thinking off
    Case(
        "nemotron",
        2699,
        NEMOTRON3,
        ASSIST,
        reasoning_format="auto",
        enable_thinking=False,
        content=ASSIST,
    ),
    # 2704: 3 Nano reasoning_format none: the forced-open <think> shows in the content
    Case(
        "nemotron",
        2704,
        NEMOTRON3,
        "I'm\nthinking\n</think>\n" + ASSIST,
        reasoning_format="none",
        enable_thinking=True,
        content="<think>\nI'm\nthinking\n</think>\n" + ASSIST,
    ),
    # 2710: 3 Nano reasoning and content
    Case(
        "nemotron",
        2710,
        NEMOTRON3,
        "I'm\nthinking\n</think>\n" + ASSIST,
        reasoning_format="auto",
        enable_thinking=True,
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 2728: 3 Nano reasoning then a call
    Case(
        "nemotron",
        2728,
        NEMOTRON3,
        "I'm\nthinking\n</think>\n" + QWEN_CALL + "\n",
        SF,
        reasoning_format="auto",
        reasoning_content=THINKING,
        tool_calls=(CALL,),
    ),
    # --- Apertus (test-chat.cpp has only these two) ---
    # 5424: a call keyed by the function name
    Case(
        "apertus",
        5424,
        APERTUS,
        '<|tools_prefix|>[{"special_function": {"arg1": 1}}]<|tools_suffix|>',
        SF,
        tool_calls=(CALL,),
    ),
    # 5431: continuation
    Case("apertus", 5431, APERTUS, "world!\nWhat's up?", prefill=PREFILL_CONTENT, content=ASSIST),
    # --- Apriel (1.5, 1.6 Thinker) ---
    # 6191: Apriel 1.5 content
    Case("apriel", 6191, APRIEL15, ASSIST, content=ASSIST),
    # 6192: Apriel 1.5 call
    Case(
        "apriel",
        6192,
        APRIEL15,
        '<tool_calls>[{"name": "special_function", "arguments": {"arg1": 1}}]</tool_calls>',
        SF,
        tool_calls=(CALL,),
    ),
    # 6211: Apriel 1.6 reasoning (forced open, its preamble included) and content
    Case(
        "apriel",
        6211,
        APRIEL16,
        "I'm\nthinking\n[BEGIN FINAL RESPONSE]\n" + ASSIST,
        reasoning_format="auto",
        enable_thinking=True,
        content=ASSIST,
        reasoning_content="Here are my reasoning steps:\nI'm\nthinking",
    ),
    # 6219: Apriel 1.6 reasoning then a call
    Case(
        "apriel",
        6219,
        APRIEL16,
        "I'm\nthinking\n[BEGIN FINAL RESPONSE]\n"
        '<tool_calls>[{"name": "special_function", "arguments": {"arg1": 1}}]</tool_calls>',
        SF,
        reasoning_format="auto",
        enable_thinking=True,
        reasoning_content="Here are my reasoning steps:\nI'm\nthinking",
        tool_calls=(Call("special_function", '{"arg1":1}'),),
    ),
    # 6239: Apriel 1.6 continuation of a prefilled reasoning
    Case(
        "apriel",
        6239,
        APRIEL16,
        " thinking\n[BEGIN FINAL RESPONSE]\n" + ASSIST,
        reasoning_format="auto",
        enable_thinking=True,
        prefill=PREFILL_REASONING,
        content=ASSIST,
        reasoning_content="I'm thinking",
    ),
    # --- Qwen3.5 ---
    # 2150: reasoning (forced open) and content
    Case(
        "qwen3.5",
        2150,
        QWEN35,
        "I'm\nthinking\n</think>\n\n" + ASSIST,
        reasoning_format="auto",
        enable_thinking=True,
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 2156: reasoning_format none
    Case(
        "qwen3.5",
        2156,
        QWEN35,
        "I'm\nthinking\n</think>\n\n" + ASSIST,
        reasoning_format="none",
        enable_thinking=True,
        content="<think>\nI'm\nthinking\n</think>\n\n" + ASSIST,
    ),
    # 2162: a call, thinking off
    Case(
        "qwen3.5",
        2162,
        QWEN35,
        QWEN_CALL,
        SF,
        reasoning_format="auto",
        enable_thinking=False,
        tool_calls=(CALL,),
    ),
    # 2174: reasoning then a call
    Case(
        "qwen3.5",
        2174,
        QWEN35,
        "I'm\nthinking\n</think>\n\n" + QWEN_CALL,
        SF,
        reasoning_format="auto",
        reasoning_content=THINKING,
        tool_calls=(CALL,),
    ),
    # 2186: two calls in parallel, thinking off
    Case(
        "qwen3.5",
        2186,
        QWEN35,
        QWEN_CALL + "\n" + QWEN_CALL_OPT,
        SF_OPT,
        reasoning_format="auto",
        parallel_tool_calls=True,
        enable_thinking=False,
        tool_calls=(CALL, CALL_OPT),
    ),
    # 2334: a call closes the thinking block without </think>
    Case(
        "qwen3.5",
        2334,
        QWEN35,
        "Need to inspect the current directory.\n<tool_call>\n<function=run_in_terminal>\n"
        "<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>",
        ("run_in_terminal",),
        reasoning_format="auto",
        enable_thinking=True,
        reasoning_content="Need to inspect the current directory.",
        tool_calls=(Call("run_in_terminal", '{"command": "pwd"}'),),
    ),
    # --- Ministral 3 Reasoning ---
    # 2604: content
    Case("ministral-3", 2604, MINISTRAL, ASSIST, content=ASSIST),
    # 2606: reasoning_format none keeps [THINK] in the content
    Case(
        "ministral-3",
        2606,
        MINISTRAL,
        "[THINK]I'm\nthinking[/THINK]" + ASSIST,
        content="[THINK]I'm\nthinking[/THINK]" + ASSIST,
    ),
    # 2611: reasoning and content
    Case(
        "ministral-3",
        2611,
        MINISTRAL,
        "[THINK]I'm\nthinking[/THINK]" + ASSIST,
        reasoning_format="auto",
        enable_thinking=True,
        content=ASSIST,
        reasoning_content=THINKING,
    ),
    # 2618: a call
    Case(
        "ministral-3",
        2618,
        MINISTRAL,
        '[TOOL_CALLS]special_function[ARGS]{"arg1":1}',
        SF,
        reasoning_format="auto",
        enable_thinking=True,
        tool_calls=(CALL,),
    ),
    # 2625: reasoning then a call
    Case(
        "ministral-3",
        2625,
        MINISTRAL,
        "[THINK]I'm\nthinking[/THINK]" + '[TOOL_CALLS]special_function[ARGS]{"arg1":1}',
        SF,
        reasoning_format="auto",
        enable_thinking=True,
        reasoning_content=THINKING,
        tool_calls=(CALL,),
    ),
    # 2634: two calls
    Case(
        "ministral-3",
        2634,
        MINISTRAL,
        '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}'
        '[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2}',
        SF_OPT,
        reasoning_format="auto",
        parallel_tool_calls=True,
        tool_calls=(CALL, CALL_OPT),
    ),
    # 2660: a call marker inside the reasoning stays reasoning
    Case(
        "ministral-3",
        2660,
        MINISTRAL,
        '[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more[/THINK]'
        '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}',
        SF,
        reasoning_format="auto",
        enable_thinking=True,
        reasoning_content='Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more',
        tool_calls=(CALL,),
    ),
]
