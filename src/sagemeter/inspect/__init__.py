"""Checkpoint facts: what a checkpoint stores, and the decode speed that follows.

`build.inspect_sources` reads the headers of local safetensors or GGUF files, or of a Hub model
by range requests, groups the tensors by role, describes their storage, counts the bytes a decoded
token reads and, for a GPU, the decode ceiling. Nothing is deployed and no weights are downloaded.
The package imports nothing heavy here: results import `facts` on every start-up.
"""
