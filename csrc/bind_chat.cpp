// llama.cpp's chat layer (core/chat): templates, llama-server's request parse, the reply
// reader. JSON text crosses the boundary both ways; Python decodes it.
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings.hpp"
#include "core/chat.hpp"
#include "core/model.hpp"

namespace py = pybind11;

namespace pyllama {

void register_chat(py::module_ & m) {
    py::class_<ChatTemplates, std::shared_ptr<ChatTemplates>>(
        m, "ChatTemplates",
        "A model's chat templates in llama.cpp's Jinja engine, with llama-server's options.")
        .def(py::init([](std::shared_ptr<Model> model, const std::string & template_src, bool use_jinja,
                         bool prefill_assistant, const std::string & reasoning_format,
                         std::map<std::string, std::string> template_kwargs, bool allow_image, bool allow_audio,
                         bool allow_video, const std::string & reasoning, int reasoning_budget,
                         const std::string & reasoning_budget_message, bool force_pure_content) {
                 ChatOptions o;
                 o.use_jinja = use_jinja;
                 o.prefill_assistant = prefill_assistant;
                 o.reasoning_format = reasoning_format;
                 o.template_kwargs = std::move(template_kwargs);
                 o.allow_image = allow_image;
                 o.allow_audio = allow_audio;
                 o.allow_video = allow_video;
                 o.reasoning = reasoning;
                 o.reasoning_budget = reasoning_budget;
                 o.reasoning_budget_message = reasoning_budget_message;
                 o.force_pure_content = force_pure_content;
                 // parsing the template and probing it for thinking renders it: off the GIL
                 // (the model is only read, and kept alive by `model` meanwhile)
                 py::gil_scoped_release release;
                 return std::make_shared<ChatTemplates>(model ? model->get() : nullptr, template_src, o);
             }),
             py::arg("model"), py::arg("template") = "", py::kw_only(), py::arg("use_jinja") = true,
             py::arg("prefill_assistant") = true, py::arg("reasoning_format") = "auto",
             py::arg("template_kwargs") = std::map<std::string, std::string>{}, py::arg("allow_image") = false,
             py::arg("allow_audio") = false, py::arg("allow_video") = false, py::arg("reasoning") = "auto",
             py::arg("reasoning_budget") = -1, py::arg("reasoning_budget_message") = "",
             py::arg("force_pure_content") = false,
             "`template`: a template text or built-in name ('' : the model's own, else chatml); "
             "`template_kwargs`: name -> JSON text. RuntimeError when the template does not parse.")
        .def("source", &ChatTemplates::source, py::arg("variant") = "",
             "The template text ('tool_use': the tool-use variant, '' when there is none).")
        .def_property_readonly("was_explicit", &ChatTemplates::was_explicit)
        .def_property_readonly("caps", &ChatTemplates::caps, "llama.cpp's chat_template_caps")
        .def_property_readonly("supports_thinking", &ChatTemplates::supports_thinking)
        .def_property_readonly("enable_thinking", &ChatTemplates::enable_thinking,
                               "enable_thinking for a request that does not set it")
        .def_property_readonly("use_jinja", [](const ChatTemplates & t) { return t.options().use_jinja; })
        .def("example", &ChatTemplates::example, py::call_guard<py::gil_scoped_release>())
        // the render runs template code from the model file; it holds no Python object
        .def("chat_params", &ChatTemplates::chat_params, py::arg("body"), py::call_guard<py::gil_scoped_release>(),
             "llama-server's oaicompat_chat_params_parse: an OpenAI chat body (JSON text) to its task "
             "parameters (JSON text). ValueError for bad input, RuntimeError when the template fails.");

    m.def("chat_media_marker", &chat_media_marker,
          "llama-server's media marker, random per process ('<__media_...__>'; LLAMA_MEDIA_MARKER "
          "pins it): what a media_marker part of a chat renders as.");
    m.def("chat_anthropic_to_openai", &anthropic_to_openai, py::arg("body"), py::call_guard<py::gil_scoped_release>(),
          "llama-server's Anthropic Messages body to an OpenAI chat body (JSON text both ways).");
    m.def("chat_responses_to_openai", &responses_to_openai, py::arg("body"), py::call_guard<py::gil_scoped_release>(),
          "llama-server's OpenAI Responses body to an OpenAI chat body (JSON text both ways).");
    m.def(
        "chat_sampling",
        [](std::shared_ptr<Model> model, const std::string & params) {
            if (!model) throw std::invalid_argument("model is None");
            ChatSampling s;
            {
                py::gil_scoped_release release;  // tokenizes; the model is only read
                s = chat_sampling(llama_model_get_vocab(model->get()), params);
            }
            return py::make_tuple(s.preserved, s.trigger_patterns, s.trigger_tokens);
        },
        py::arg("model"), py::arg("params"),
        "(preserved tokens, trigger patterns, trigger tokens) of a chat's task parameters, as llama-server "
        "resolves them against the vocabulary.");

    py::class_<ChatReader>(m, "ChatReader", "A reply parsed as it streams (llama-server's task_result_state).")
        .def(py::init<const std::string &, bool, const std::string &>(), py::arg("params"), py::arg("stream"),
             py::arg("reasoning_format") = "auto")
        // one caller owns a reader; the parse touches nothing shared
        .def("update", &ChatReader::update, py::arg("text"), py::arg("partial"),
             py::call_guard<py::gil_scoped_release>(),
             "Add text; JSON {message, diffs, unparsed}. The last call has partial False.");
}

}  // namespace pyllama
