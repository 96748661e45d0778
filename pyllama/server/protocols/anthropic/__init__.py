"""Anthropic Messages: /v1/messages and /v1/messages/count_tokens (``routes``), and the
translation of Anthropic's request pieces into the pipeline's chat shapes (``convert``)."""
