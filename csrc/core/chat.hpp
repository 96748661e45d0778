// llama.cpp's chat layer as llama-server runs it: templates (common/chat), the OpenAI request
// parse (tools/server oaicompat_chat_params_parse), the Anthropic and Responses request
// conversions, and the reply parser with its stream diffs (task_result_state). Everything
// crosses as JSON text, so the Python side needs no copy of llama.cpp's types. Plain C++17:
// no pybind11 here; every call may run with the GIL released (no shared mutable state but
// ChatReader's, which one caller owns).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

struct llama_model;
struct llama_vocab;

namespace pyllama {

// llama-server's server_chat_params, from its flags (--jinja, --prefill-assistant,
// --reasoning-format, --chat-template-kwargs, --reasoning, --reasoning-budget[-message],
// --skip-chat-parsing) and the projector's modalities.
struct ChatOptions {
    bool use_jinja = true;
    bool prefill_assistant = true;
    std::string reasoning_format = "auto";             // common_reasoning_format's name
    std::map<std::string, std::string> template_kwargs;  // name -> JSON text
    bool allow_image = false;
    bool allow_audio = false;
    bool allow_video = false;
    std::string reasoning = "auto";  // on | off | auto: enable_thinking as llama-server derives it
    int reasoning_budget = -1;
    std::string reasoning_budget_message;
    bool force_pure_content = false;
};

class ChatTemplates {
public:
    // The model's template (or `override_src`: a template text or a built-in name); bos/eos
    // overrides as common_chat_templates_init takes them. Throws std::runtime_error when
    // the template does not parse.
    ChatTemplates(const llama_model * model, const std::string & override_src, const ChatOptions & opt);
    ~ChatTemplates();
    ChatTemplates(const ChatTemplates &) = delete;
    ChatTemplates & operator=(const ChatTemplates &) = delete;

    std::string source(const std::string & variant = "") const;
    bool was_explicit() const;
    std::map<std::string, bool> caps() const;
    bool supports_thinking() const;  // common_chat_templates_support_enable_thinking
    bool enable_thinking() const;    // what a request that does not say gets
    std::string example() const;     // common_chat_format_example
    const ChatOptions & options() const { return opt_; }

    // oaicompat_chat_params_parse: an OpenAI chat body (JSON) to llama-server's task
    // parameters (JSON: prompt, grammar, grammar_lazy, grammar_triggers, preserved_tokens,
    // stop, chat_format, chat_parser, generation_prompt, reasoning_budget_*, and the body's
    // other fields). Media parts must already be media_marker parts. std::invalid_argument
    // for bad input (a 400 in llama-server), std::runtime_error for a template that fails.
    std::string chat_params(const std::string & body_json) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    ChatOptions opt_;
};

// llama-server's media marker (random per process, LLAMA_MEDIA_MARKER pins it): the text a
// media_marker part renders as.
std::string chat_media_marker();

// llama-server's request conversions to an OpenAI chat body (JSON in, JSON out).
std::string anthropic_to_openai(const std::string & body_json);
std::string responses_to_openai(const std::string & body_json);

// What the sampler gets from a chat's task parameters, resolved against the vocabulary as
// llama-server's task schema and common_sampler_init do: preserved tokens (the ones that
// are single tokens), and the lazy grammar's triggers as regex patterns and token ids.
struct ChatSampling {
    std::vector<int32_t> preserved;
    std::vector<std::string> trigger_patterns;
    std::vector<int32_t> trigger_tokens;
};
ChatSampling chat_sampling(const llama_vocab * vocab, const std::string & params_json);

// A reply read back as it streams (task_result_state): the text so far parsed, whole or
// partial, with the OpenAI message deltas since the last call.
class ChatReader {
public:
    // `params_json`: the task parameters chat_params returned (chat_format, chat_parser,
    // generation_prompt, reasoning_format ...); `stream` as the request asks;
    // `reasoning_format`: the server's default.
    ChatReader(const std::string & params_json, bool stream, const std::string & reasoning_format);
    ~ChatReader();
    ChatReader(const ChatReader &) = delete;
    ChatReader & operator=(const ChatReader &) = delete;

    // {"message": the OpenAI message so far, "diffs": [OpenAI deltas], "unparsed": bool},
    // and once not partial "whole": the message a whole (non-streamed) answer carries.
    // A final text that does not parse as the format (llama-server's 500) comes back as
    // content, "unparsed" true; a partial one that does not is never an error.
    // A whole reply is one update with is_partial false on a new reader.
    std::string update(const std::string & text_added, bool is_partial);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pyllama
