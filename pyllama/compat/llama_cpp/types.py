"""llama-cpp-python's ``llama_types``: the OpenAI-shaped dicts that ``Llama`` takes and
returns, as TypedDicts under the same names, for type hints and for building messages
(``ChatCompletionRequestUserMessage(role="user", content="Hi")`` is a plain dict).

Keys a response may leave out are optional (``total=False`` halves: Python 3.9 has no
``NotRequired``).
"""

# typing's List/Optional/Union, not the newer syntax: these annotations are evaluated (by
# pydantic, get_type_hints) on Python 3.9 too
# ruff: noqa: UP006, UP007, UP035, UP045

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

JsonType = Union[None, int, str, bool, List[Any], Dict[str, Any]]

# ------------------------------------------------------------------ embeddings


class EmbeddingUsage(TypedDict):
    prompt_tokens: int
    total_tokens: int


class Embedding(TypedDict):
    index: int
    object: str
    embedding: Union[List[float], List[List[float]]]


class CreateEmbeddingResponse(TypedDict):
    object: Literal["list"]
    model: str
    data: List[Embedding]
    usage: EmbeddingUsage


# ----------------------------------------------------------------- completions


class CompletionLogprobs(TypedDict):
    text_offset: List[int]
    token_logprobs: List[Optional[float]]
    tokens: List[str]
    top_logprobs: List[Optional[Dict[str, float]]]


class CompletionChoice(TypedDict):
    text: str
    index: int
    logprobs: Optional[CompletionLogprobs]
    finish_reason: Optional[Literal["stop", "length"]]


class CompletionUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _CreateCompletionResponse(TypedDict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: List[CompletionChoice]


class CreateCompletionResponse(_CreateCompletionResponse, total=False):
    usage: CompletionUsage


# ------------------------------------------------------------ chat: responses


class ChatCompletionResponseFunctionCall(TypedDict):
    name: str
    arguments: str


class ChatCompletionMessageToolCallFunction(TypedDict):
    name: str
    arguments: str


class ChatCompletionMessageToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ChatCompletionMessageToolCallFunction


ChatCompletionMessageToolCalls = List[ChatCompletionMessageToolCall]


class _ChatCompletionResponseMessage(TypedDict):
    content: Optional[str]
    role: Literal["assistant", "function"]


class ChatCompletionResponseMessage(_ChatCompletionResponseMessage, total=False):
    tool_calls: ChatCompletionMessageToolCalls
    function_call: ChatCompletionResponseFunctionCall  # deprecated by OpenAI, still sent


class _ChatCompletionFunction(TypedDict):
    name: str
    parameters: Dict[str, JsonType]


class ChatCompletionFunction(_ChatCompletionFunction, total=False):
    description: str


class ChatCompletionTopLogprobToken(TypedDict):
    token: str
    logprob: float
    bytes: Optional[List[int]]


class ChatCompletionLogprobToken(ChatCompletionTopLogprobToken):
    top_logprobs: List[ChatCompletionTopLogprobToken]


class ChatCompletionLogprobs(TypedDict):
    content: Optional[List[ChatCompletionLogprobToken]]
    refusal: Optional[List[ChatCompletionLogprobToken]]


class ChatCompletionResponseChoice(TypedDict):
    index: int
    message: ChatCompletionResponseMessage
    logprobs: Optional[ChatCompletionLogprobs]
    finish_reason: Optional[str]


class CreateChatCompletionResponse(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: List[ChatCompletionResponseChoice]
    usage: CompletionUsage


# ------------------------------------------------------------- chat: streams


class ChatCompletionMessageToolCallChunkFunction(TypedDict):
    name: Optional[str]
    arguments: str


class ChatCompletionMessageToolCallChunk(TypedDict):
    index: int
    id: Optional[str]
    type: Literal["function"]
    function: ChatCompletionMessageToolCallChunkFunction


class ChatCompletionStreamResponseDeltaEmpty(TypedDict):
    pass


class ChatCompletionStreamResponseDeltaFunctionCall(TypedDict):
    name: str
    arguments: str


class ChatCompletionStreamResponseDelta(TypedDict, total=False):
    content: Optional[str]
    function_call: Optional[ChatCompletionStreamResponseDeltaFunctionCall]
    tool_calls: Optional[List[ChatCompletionMessageToolCallChunk]]
    role: Optional[Literal["system", "user", "assistant", "tool"]]


class _ChatCompletionStreamResponseChoice(TypedDict):
    index: int
    delta: Union[ChatCompletionStreamResponseDelta, ChatCompletionStreamResponseDeltaEmpty]
    finish_reason: Optional[Literal["stop", "length", "tool_calls", "function_call"]]


class ChatCompletionStreamResponseChoice(_ChatCompletionStreamResponseChoice, total=False):
    logprobs: Optional[ChatCompletionLogprobs]


class CreateChatCompletionStreamResponse(TypedDict):
    id: str
    model: str
    object: Literal["chat.completion.chunk"]
    created: int
    choices: List[ChatCompletionStreamResponseChoice]


# ------------------------------------------------------------- chat: requests


class _ChatCompletionFunctions(TypedDict):
    name: str
    parameters: Dict[str, JsonType]


class ChatCompletionFunctions(_ChatCompletionFunctions, total=False):
    description: str


class ChatCompletionFunctionCallOption(TypedDict):
    name: str


class _ChatCompletionRequestResponseFormat(TypedDict):
    type: Literal["text", "json_object"]


class ChatCompletionRequestResponseFormat(_ChatCompletionRequestResponseFormat, total=False):
    schema: JsonType  # llama-cpp-python's own: the JSON schema to constrain to


class ChatCompletionRequestMessageContentPartText(TypedDict):
    type: Literal["text"]
    text: str


class _ChatCompletionRequestMessageContentPartImageImageUrl(TypedDict):
    url: str


class ChatCompletionRequestMessageContentPartImageImageUrl(
    _ChatCompletionRequestMessageContentPartImageImageUrl, total=False
):
    detail: Literal["auto", "low", "high"]


class ChatCompletionRequestMessageContentPartImage(TypedDict):
    type: Literal["image_url"]
    image_url: Union[str, ChatCompletionRequestMessageContentPartImageImageUrl]


ChatCompletionRequestMessageContentPart = Union[
    ChatCompletionRequestMessageContentPartText,
    ChatCompletionRequestMessageContentPartImage,
]


class _ChatCompletionRequestSystemMessage(TypedDict):
    role: Literal["system"]


class ChatCompletionRequestSystemMessage(_ChatCompletionRequestSystemMessage, total=False):
    content: Optional[str]


class _ChatCompletionRequestUserMessage(TypedDict):
    role: Literal["user"]


class ChatCompletionRequestUserMessage(_ChatCompletionRequestUserMessage, total=False):
    content: Optional[Union[str, List[ChatCompletionRequestMessageContentPart]]]


class ChatCompletionRequestAssistantMessageFunctionCall(TypedDict):
    name: str
    arguments: str


class _ChatCompletionRequestAssistantMessage(TypedDict):
    role: Literal["assistant"]


class ChatCompletionRequestAssistantMessage(_ChatCompletionRequestAssistantMessage, total=False):
    content: Optional[str]
    tool_calls: ChatCompletionMessageToolCalls
    function_call: ChatCompletionRequestAssistantMessageFunctionCall


class ChatCompletionRequestToolMessage(TypedDict):
    role: Literal["tool"]
    content: Optional[str]
    tool_call_id: str


class ChatCompletionRequestFunctionMessage(TypedDict):
    role: Literal["function"]
    content: Optional[str]
    name: str


ChatCompletionRequestMessage = Union[
    ChatCompletionRequestSystemMessage,
    ChatCompletionRequestUserMessage,
    ChatCompletionRequestAssistantMessage,
    ChatCompletionRequestToolMessage,
    ChatCompletionRequestFunctionMessage,
]


class ChatCompletionRequestFunctionCallOption(TypedDict):
    name: str


ChatCompletionRequestFunctionCall = Union[
    Literal["none", "auto"], ChatCompletionRequestFunctionCallOption
]

ChatCompletionFunctionParameters = Dict[str, JsonType]


class _ChatCompletionToolFunction(TypedDict):
    name: str
    parameters: ChatCompletionFunctionParameters


class ChatCompletionToolFunction(_ChatCompletionToolFunction, total=False):
    description: str


class ChatCompletionTool(TypedDict):
    type: Literal["function"]
    function: ChatCompletionToolFunction


class ChatCompletionNamedToolChoiceFunction(TypedDict):
    name: str


class ChatCompletionNamedToolChoice(TypedDict):
    type: Literal["function"]
    function: ChatCompletionNamedToolChoiceFunction


ChatCompletionToolChoiceOption = Union[
    Literal["none", "auto", "required"], ChatCompletionNamedToolChoice
]

# the older names llama-cpp-python keeps beside the OpenAI ones
EmbeddingData = Embedding
CompletionChunk = CreateCompletionResponse
Completion = CreateCompletionResponse
CreateCompletionStreamResponse = CreateCompletionResponse
ChatCompletionMessage = ChatCompletionResponseMessage
ChatCompletionChoice = ChatCompletionResponseChoice
ChatCompletion = CreateChatCompletionResponse
ChatCompletionChunkDeltaEmpty = ChatCompletionStreamResponseDeltaEmpty
ChatCompletionChunkChoice = ChatCompletionStreamResponseChoice
ChatCompletionChunkDelta = ChatCompletionStreamResponseDelta
ChatCompletionChunk = CreateChatCompletionStreamResponse
ChatCompletionStreamResponse = CreateChatCompletionStreamResponse
ChatCompletionResponseFunction = ChatCompletionFunction
ChatCompletionFunctionCall = ChatCompletionResponseFunctionCall

_TYPING = {"Any", "Dict", "List", "Literal", "Optional", "TypedDict", "Union"}
__all__ = [n for n in dir() if n[0].isupper() and n not in _TYPING]
