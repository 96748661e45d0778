// One register_* per area; module.cpp calls them in dependency order.
#pragma once

#include <pybind11/pybind11.h>

namespace pyllama {
void register_backends(pybind11::module_ & m);
void register_errors(pybind11::module_ & m);
void register_model(pybind11::module_ & m);
void register_batch(pybind11::module_ & m);
void register_context(pybind11::module_ & m);
void register_sampler(pybind11::module_ & m);
void register_engine(pybind11::module_ & m);
void register_rpc(pybind11::module_ & m);
void register_projector(pybind11::module_ & m);
void register_threads(pybind11::module_ & m);
void register_chat(pybind11::module_ & m);
}  // namespace pyllama
