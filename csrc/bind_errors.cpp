#include <cerrno>
#include <system_error>

#include "bindings.hpp"
#include "core/log.hpp"

namespace py = pybind11;

namespace pyllama {

void register_errors(py::module_ & m) {
    // LlamaError subclasses RuntimeError: a failure inside llama.cpp.
    py::register_exception<LlamaError>(m, "LlamaError", PyExc_RuntimeError);
    // errno-carrying failures (a missing model file...) become OSError subclasses.
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const std::system_error & e) {
            PyObject * type = e.code().value() == ENOENT ? PyExc_FileNotFoundError : PyExc_OSError;
            PyErr_SetObject(type, py::make_tuple(e.code().value(), e.what()).ptr());
        }
    });
}

}  // namespace pyllama
