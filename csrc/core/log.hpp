// Logging bridge and error type. llama.cpp reports most failures through its log
// callback rather than return values, so we keep each thread's recent warnings and
// errors and quote them in the exception that the failing call raises.
#pragma once

#include <stdexcept>
#include <string>

namespace pyllama {

// A failure inside llama.cpp (load, decode, state I/O...). Bound as pyllama.LlamaError.
class LlamaError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

void log_init();                // install the callback (idempotent)
void log_set_level(int level);  // lowest ggml_log_level echoed to stderr; 5 silences all
int  log_get_level();
bool log_set_file(const std::string & path);  // also append echoed lines there ("": stop)
void log_clear();               // forget this thread's captured messages
std::string log_take();         // this thread's captured warnings/errors, then clear
void log_append(const std::string & text);  // add to this thread's captured messages
// The "offloaded N/M layers to GPU" of this thread's last model load (since log_clear).
bool log_offload(int & on_devices, int & total);

// Throw LlamaError(what), followed by what llama.cpp logged on this thread.
[[noreturn]] void fail(const std::string & what);

}  // namespace pyllama
