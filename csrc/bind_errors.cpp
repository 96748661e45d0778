#include <system_error>

#include "bindings.hpp"
#include "core/log.hpp"

namespace py = pybind11;

namespace pyllama {

void register_errors(py::module_ & m) {
    // LlamaError subclasses RuntimeError: a failure inside llama.cpp.
    static py::exception<LlamaError> llama_error(m, "LlamaError", PyExc_RuntimeError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const LlamaError & e) {
            py::set_error(llama_error, e.what());
        } catch (const std::system_error & e) {
            // errno-carrying failures (missing model file...) become OSError subclasses
            PyErr_SetObject(e.code().value() == ENOENT ? PyExc_FileNotFoundError : PyExc_OSError,
                            py::make_tuple(e.code().value(), e.what()).ptr());
        }
    });
}

}  // namespace pyllama
