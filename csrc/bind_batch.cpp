#include <pybind11/stl.h>

#include "bindings.hpp"
#include "core/batch.hpp"

namespace py = pybind11;

namespace pyllama {

void register_batch(py::module_ & m) {
    py::class_<Batch>(m, "Batch", "Tokens with positions, sequence ids and output flags for one decode.")
        .def(py::init<int32_t, int32_t>(), py::arg("capacity"), py::arg("n_seq_max") = 1)
        .def("add", &Batch::add, py::arg("token"), py::arg("pos"), py::arg("seq_ids"), py::arg("logits") = false)
        .def("add_sequence", &Batch::add_sequence, py::arg("tokens"), py::arg("pos0"), py::arg("seq_id"),
             py::arg("logits_last") = true, "Append tokens of one sequence at pos0, pos0+1, ...")
        .def("set_logits", &Batch::set_logits, py::arg("index"), py::arg("logits"))
        .def("logits_at", &Batch::logits_at, py::arg("index"))
        .def("token_at", &Batch::token_at, py::arg("index"))
        .def("clear", &Batch::clear)
        .def("__len__", &Batch::size)
        .def_property_readonly("capacity", &Batch::capacity)
        .def_property_readonly("n_seq_max", &Batch::n_seq_max);
}

}  // namespace pyllama
