// llama.cpp's chat layer, called as llama-server calls it (see chat.hpp). The request
// parse, the conversions and the stream state are llama-server's own functions, compiled
// from the vendored tools/server sources (CMakeLists.txt: pyllama-server-chat); what this
// file adds is the JSON-text boundary and the two places where pyllama differs on purpose:
// a final reply that does not parse is content, not an error.
#include "core/chat.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "chat.h"
#include "common.h"
#include "llama.h"
#include "log.h"
#include "server-chat.h"
#include "server-common.h"
#include "server-task.h"

namespace pyllama {

namespace {

json parse_json(const std::string & text, const char * what) {
    try {
        return json::parse(text);
    } catch (const std::exception & e) {
        throw std::invalid_argument(std::string(what) + " is not valid JSON: " + e.what());
    }
}

// pyllama loads media itself (pyllama/server/media: URLs, video frames, its own checks) and
// hands the chat layer media_marker parts; llama-server's request parse takes media parts
// only as files it loads. Each marker part goes in as a placeholder image part (a one-byte
// base64 image, decoded and dropped) that the parse turns back into a media_marker part with
// get_media_marker(), the marker pyllama's media pipeline uses (chat_media_marker). Any other
// media part is refused: nothing is fetched or read from here. Returns each marker part's
// text in order: one marker, or for a video "Video:", a marker a frame and timestamps
// (pyllama decodes frames itself), which restore_marker_texts puts back in the prompt.
std::vector<std::string> media_markers_as_placeholders(json & body) {
    std::vector<std::string> texts;
    if (!body.contains("messages") || !body.at("messages").is_array()) return texts;
    size_t i = 0;
    for (auto & msg : body.at("messages")) {
        const size_t mi = i++;
        if (!msg.is_object() || !msg.contains("content") || !msg.at("content").is_array()) continue;
        size_t j = 0;
        for (auto & part : msg.at("content")) {
            const size_t pj = j++;
            if (!part.is_object() || !part.contains("type") || !part.at("type").is_string()) continue;
            const std::string type = part.at("type").get<std::string>();
            if (type == "media_marker") {
                texts.push_back(part.contains("text") && part.at("text").is_string() ? part.at("text").get<std::string>()
                                                                                     : get_media_marker());
                json image = json::object();
                image["url"] = "data:image/png;base64,AA==";
                part["type"] = "image_url";
                part["image_url"] = image;
                part.erase("text");
            } else if (type == "image_url" || type == "input_audio" || type == "input_video" || type == "video_url") {
                throw std::invalid_argument("messages[" + std::to_string(mi) + "].content[" + std::to_string(pj) +
                                            "]: a " + type + " part needs a multimodal projector");
            }
        }
    }
    return texts;
}

// the k-th marker of the rendered prompt is the k-th placeholder's: its part's own text goes
// back there. A template that renders a message's content other than once (no real one
// does) leaves the markers as they are, and the projector's count check refuses the prompt.
void restore_marker_texts(json & out, const std::vector<std::string> & texts) {
    if (texts.empty() || !out.contains("prompt") || !out.at("prompt").is_string()) return;
    const std::string marker = get_media_marker();
    bool all_plain = true;
    for (const auto & t : texts) all_plain = all_plain && t == marker;
    if (all_plain) return;
    const std::string prompt = out.at("prompt").get<std::string>();
    std::string restored;
    size_t pos = 0, k = 0;
    for (size_t at; (at = prompt.find(marker, pos)) != std::string::npos; pos = at + marker.size(), ++k) {
        if (k >= texts.size()) return;
        restored += prompt.substr(pos, at - pos) + texts[k];
    }
    if (k != texts.size()) return;
    out["prompt"] = restored + prompt.substr(pos);
}

}  // namespace

std::string chat_media_marker() { return get_media_marker(); }

struct ChatTemplates::Impl {
    server_chat_params params;
    bool supports_thinking = false;
};

ChatTemplates::ChatTemplates(const llama_model * model, const std::string & override_src, const ChatOptions & opt)
    : impl_(std::make_unique<Impl>()), opt_(opt) {
    // common_chat_templates_init throws std::runtime_error for a template that does not parse
    auto tmpls = common_chat_templates_init(model, override_src);
    // llama-server (server-context.cpp): thinking is on unless --reasoning off, and only
    // where the template supports it
    impl_->supports_thinking = opt.use_jinja && common_chat_templates_support_enable_thinking(tmpls.get());
    const bool enable_thinking = opt.reasoning != "off" && impl_->supports_thinking;
    auto & p = impl_->params;
    p.use_jinja = opt.use_jinja;
    p.prefill_assistant = opt.prefill_assistant;
    p.reasoning_format = common_reasoning_format_from_name(opt.reasoning_format);
    p.chat_template_kwargs = opt.template_kwargs;
    p.tmpls = std::move(tmpls);
    // media arrive as placeholders for markers pyllama placed (media_markers_as_placeholders):
    // which modalities the model takes was checked where they were loaded
    p.allow_image = p.allow_audio = p.allow_video = true;
    p.enable_thinking = enable_thinking;
    p.reasoning_budget = opt.reasoning_budget;
    p.reasoning_budget_message = opt.reasoning_budget_message;
    p.force_pure_content = opt.force_pure_content;
}

ChatTemplates::~ChatTemplates() = default;

std::string ChatTemplates::source(const std::string & variant) const {
    return common_chat_templates_source(impl_->params.tmpls.get(), variant);
}

bool ChatTemplates::was_explicit() const { return common_chat_templates_was_explicit(impl_->params.tmpls.get()); }

std::map<std::string, bool> ChatTemplates::caps() const {
    return common_chat_templates_get_caps(impl_->params.tmpls.get());
}

bool ChatTemplates::supports_thinking() const { return impl_->supports_thinking; }

bool ChatTemplates::enable_thinking() const { return impl_->params.enable_thinking; }

std::string ChatTemplates::example() const {
    return common_chat_format_example(impl_->params.tmpls.get(), opt_.use_jinja, opt_.template_kwargs);
}

std::string ChatTemplates::chat_params(const std::string & body_json) const {
    json body = parse_json(body_json, "the request");
    std::vector<raw_buffer> files;  // the placeholders' bytes, dropped
    json out;
    try {
        const auto texts = media_markers_as_placeholders(body);
        out = oaicompat_chat_params_parse(body, impl_->params, files);
        restore_marker_texts(out, texts);
    } catch (const common_json_error & e) {
        // a field of the wrong JSON type: bad input, a 400 (llama-server answers 500)
        throw std::invalid_argument(e.what());
    }
    return out.dump_safe();
}

namespace {

// a request conversion of llama-server's, JSON text in and out; a field of the wrong JSON
// type is bad input (std::invalid_argument: a 400)
std::string convert(json (*fn)(const json &), const std::string & body_json) {
    try {
        return fn(parse_json(body_json, "the request")).dump_safe();
    } catch (const common_json_error & e) {
        throw std::invalid_argument(e.what());
    }
}

}  // namespace

std::string anthropic_to_openai(const std::string & body_json) {
    return convert(server_chat_convert_anthropic_to_oai, body_json);
}

std::string responses_to_openai(const std::string & body_json) {
    return convert(server_chat_convert_responses_to_chatcmpl, body_json);
}

ChatSampling chat_sampling(const llama_vocab * vocab, const std::string & params_json) {
    // server-schema.cpp's preserved_tokens and grammar_triggers handlers, then
    // common_sampler_init's trigger conversion
    const json data = parse_json(params_json, "the chat parameters");
    ChatSampling out;
    if (data.contains("preserved_tokens")) {
        for (const auto & t : data.at("preserved_tokens")) {
            auto ids = common_tokenize(vocab, t.get<std::string>(), false, true);
            if (ids.size() == 1) out.preserved.push_back(ids[0]);
        }
    }
    auto preserved = [&](llama_token tok) {
        for (auto p : out.preserved) {
            if (p == tok) return true;
        }
        return false;
    };
    if (data.contains("grammar_triggers")) {
        for (const auto & t : data.at("grammar_triggers")) {
            server_grammar_trigger ct(t);
            const auto & trig = ct.value;
            switch (trig.type) {
                case COMMON_GRAMMAR_TRIGGER_TYPE_WORD: {
                    auto ids = common_tokenize(vocab, trig.value, false, true);
                    if (ids.size() == 1) {
                        if (!preserved(ids[0])) {
                            throw std::runtime_error("Grammar trigger word should be marked as preserved token: " +
                                                     trig.value);
                        }
                        out.trigger_tokens.push_back(ids[0]);
                    } else {
                        out.trigger_patterns.push_back(regex_escape(trig.value));
                    }
                    break;
                }
                case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:
                    out.trigger_patterns.push_back(trig.value);
                    break;
                case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
                    const auto & pattern = trig.value;
                    std::string anchored = "^$";
                    if (!pattern.empty()) {
                        anchored = (pattern.front() != '^' ? "^" : "") + pattern + (pattern.back() != '$' ? "$" : "");
                    }
                    out.trigger_patterns.push_back(anchored);
                    break;
                }
                case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:
                    out.trigger_tokens.push_back(trig.token);
                    break;
            }
        }
    }
    const bool lazy = data.contains("grammar_lazy") && data.at("grammar_lazy").is_boolean() && data.at("grammar_lazy").get<bool>();
    if (lazy && data.contains("grammar") && out.trigger_patterns.empty() && out.trigger_tokens.empty()) {
        throw std::runtime_error("Error: no triggers set for lazy grammar!");
    }
    return out;
}

struct ChatReader::Impl {
    std::unique_ptr<task_result_state> state;
};

namespace {

common_chat_parser_params parser_params(const json & data, bool stream, const std::string & reasoning_format) {
    // server-schema.cpp's chat parser fields, in the same order
    common_chat_parser_params p;
    p.reasoning_format = common_reasoning_format_from_name(reasoning_format);
    if (data.contains("chat_format")) p.format = static_cast<common_chat_format>(data.at("chat_format").get<int>());
    if (data.contains("reasoning_format")) {
        p.reasoning_format = common_reasoning_format_from_name(data.at("reasoning_format").get<std::string>());
    }
    if (data.contains("generation_prompt")) p.generation_prompt = data.at("generation_prompt").get<std::string>();
    if (data.contains("parse_tool_calls")) p.parse_tool_calls = data.at("parse_tool_calls").get<bool>();
    if (data.contains("chat_parser")) p.parser.load(data.at("chat_parser").get<std::string>());
    if (data.contains("continue_final_message")) {
        p.is_continuation = common_chat_continuation_parse(data.at("continue_final_message")) !=
                            COMMON_CHAT_CONTINUATION_NONE;
    }
    if (data.contains("echo")) p.echo = data.at("echo").get<bool>();
    p.reasoning_in_content = stream && p.reasoning_format == COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY;
    return p;
}

json message_json(const common_chat_msg & msg) {
    // the assistant message as llama-server's final answer carries it
    return msg.to_json_oaicompat();
}

}  // namespace

ChatReader::ChatReader(const std::string & params_json, bool stream, const std::string & reasoning_format)
    : impl_(std::make_unique<Impl>()) {
    const json data = parse_json(params_json, "the chat parameters");
    try {
        impl_->state = std::make_unique<task_result_state>(parser_params(data, stream, reasoning_format));
    } catch (const common_json_error & e) {
        throw std::invalid_argument(e.what());
    }
}

ChatReader::~ChatReader() = default;

std::string ChatReader::update(const std::string & text_added, bool is_partial) {
    auto & st = *impl_->state;
    std::vector<common_chat_msg_diff> diffs;
    bool unparsed = false;
    try {
        st.update_chat_msg(text_added, is_partial, diffs);
    } catch (const std::exception & e) {
        if (is_partial) throw;
        // llama-server answers 500 here; pyllama keeps what was sent and gives the rest of
        // the text as content (docs/compatibility.md)
        LOG_WRN("pyllama: the reply does not parse as its chat format (%s); answered as content\n", e.what());
        unparsed = true;
        const std::string & text = st.generated_text;
        common_chat_msg msg = st.chat_msg;
        std::string rest = text;
        const std::string & sent = !msg.content.empty() ? msg.content : msg.reasoning_content;
        if (!sent.empty()) {
            const auto at = text.rfind(sent);
            rest = at == std::string::npos ? std::string() : text.substr(at + sent.size());
        } else if (!msg.tool_calls.empty()) {
            rest.clear();  // calls already streamed stand; nothing marks where they ended
        }
        common_chat_msg next = msg;
        next.role = "assistant";
        next.content += rest;
        diffs = common_chat_msg_diff::compute_diffs(msg, next);
        st.chat_msg = next;
    }
    json out_diffs = json::array();
    for (const auto & d : diffs) out_diffs.push_back(server_chat_msg_diff_to_json_oaicompat(d));
    json out = {
        {"message", message_json(st.chat_msg)},
        {"diffs", out_diffs},
        {"unparsed", unparsed},
    };
    if (!is_partial) {
        // a whole answer (to_json_oaicompat_chat and its kin): a reply that parsed to
        // nothing is the generated text as content
        common_chat_msg whole = st.chat_msg;
        if (whole.empty()) {
            whole.role = "assistant";
            whole.content = st.generated_text;
        }
        out["whole"] = message_json(whole);
    }
    return out.dump_safe();
}

}  // namespace pyllama
