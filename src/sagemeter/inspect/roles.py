"""Which part of the model a tensor belongs to, from its name alone.

The roles follow what a decoded token reads: the transformer body (every weight, every token),
the vocabulary embedding (one row in; the output projection, lm_head or the tied embedding, in
full), the per-layer embedding (Gemma's per-layer inputs: one row per token), and the audio and
vision towers (idle while text is decoded). Hugging Face and GGUF (llama.cpp) names are both known;
a name matching none of them is `other`.
"""

from __future__ import annotations

import re

PER_LAYER_EMBEDDING = "per-layer embedding"
VOCABULARY_EMBEDDING = "vocabulary embedding"
BODY = "transformer body"
AUDIO_TOWER = "audio tower"
VISION_TOWER = "vision tower"
OTHER = "other"
ROLE_ORDER = (PER_LAYER_EMBEDDING, VOCABULARY_EMBEDDING, BODY, AUDIO_TOWER, VISION_TOWER, OTHER)

AUDIO_PARTS = frozenset({"audio_tower", "audio_model", "audio_encoder", "embed_audio", "audio"})
VISION_PARTS = frozenset(
    {
        "vision_tower",
        "vision_model",
        "vision_encoder",
        "visual",
        "embed_vision",
        "multi_modal_projector",
        "mm_projector",
        "image_newline",
    }
)
PER_LAYER_EMBEDDING_PARTS = frozenset({"embed_tokens_per_layer", "per_layer_token_embd"})
INPUT_EMBEDDING_PARTS = frozenset(
    {"embed_tokens", "wte", "word_embeddings", "tok_embeddings", "embed_in", "token_embd"}
)
OUTPUT_PROJECTION_PARTS = frozenset({"lm_head", "embed_out"})
# Containers of numbered layers, in Hugging Face and GGUF naming.
LAYER_PARTS = frozenset({"layers", "layer", "h", "blocks", "block", "blk", "decoder_layers"})
# Tensors of the text model outside its numbered layers that every token still reads.
BODY_PARTS = frozenset(
    {
        "norm",
        "final_norm",
        "final_layernorm",
        "ln_f",
        "norm_f",
        "output_norm",
        "rope_freqs",
        "per_layer_model_projection",
        "per_layer_projection_norm",
        "per_layer_model_proj",
        "per_layer_proj_norm",
        "altup_projections",
        "altup_unembed_projections",
    }
)
NUMBER = re.compile(r"^\d+$")


def parts_of(name: str) -> list[str]:
    return name.lower().split(".")


def is_output_projection(name: str, gguf: bool = False) -> bool:
    """lm_head (Hugging Face) or `output.weight` (GGUF): the matrix that makes the logits."""
    parts = parts_of(name)
    if gguf and parts[0] == "output" and len(parts) == 2:
        return True
    return any(part in OUTPUT_PROJECTION_PARTS for part in parts)


def is_input_embedding(name: str) -> bool:
    return any(part in INPUT_EMBEDDING_PARTS for part in parts_of(name))


def role_of(name: str, gguf: bool = False) -> str:
    """The role of one tensor by its name (see the module docstring)."""
    parts = parts_of(name)
    if any(part in AUDIO_PARTS for part in parts) or (gguf and parts[0] == "a"):
        return AUDIO_TOWER
    if any(part in VISION_PARTS for part in parts) or (gguf and parts[0] in ("v", "mm")):
        return VISION_TOWER
    if any(part in PER_LAYER_EMBEDDING_PARTS for part in parts):
        return PER_LAYER_EMBEDDING
    if is_output_projection(name, gguf) or is_input_embedding(name):
        return VOCABULARY_EMBEDDING
    numbered = any(
        part in LAYER_PARTS and index + 1 < len(parts) and NUMBER.match(parts[index + 1])
        for index, part in enumerate(parts)
    )
    if numbered or any(part in BODY_PARTS for part in parts):
        return BODY
    return OTHER
