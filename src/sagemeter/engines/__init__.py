"""Engines sagemeter starts and stops itself besides the embedded llama.cpp one: a real vLLM.

- `vllm_install`: which `vllm` to run (yours, or sagemeter's own environment in the cache dir,
  made by `sagemeter engines install vllm`).
- `hf_export`: the shipped GGUF checkpoint as a Hugging Face folder vLLM can load (exact F32).
- `vllm_server`: `vllm serve` on 127.0.0.1, started, waited for, and stopped with its children.
"""
