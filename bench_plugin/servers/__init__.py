"""Reference OpenAI-compatible inference servers (LLM, embedding, ASR, synthetic).

Run one with ``python -m bench_plugin.servers {llm,embedding,asr,synthetic} --help``.
The model servers build plain-PyTorch models with random seeded weights from size
presets (no downloads); the synthetic server has known latencies and no torch.
Importing this package imports nothing heavy.
"""
