"""Chat for the llama-cpp-python API: format names to templates, calls to prompts and back."""
