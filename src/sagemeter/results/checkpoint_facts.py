"""What `inspect` reports about a checkpoint: the records a result, a comparison and a face share.

Sizes are bytes as stored; shares are fractions of the checkpoint's tensor bytes. Nothing here is
measured: every figure follows from the checkpoint's own header (and config.json).
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class TensorGroup(BaseModel):
    """The tensors of one role, e.g. the transformer body or the vocabulary embedding."""

    name: str = Field(
        description="per-layer embedding | vocabulary embedding | transformer body | ..."
    )
    bytes: int
    share: float = Field(description="bytes / the checkpoint's tensor bytes (0 to 1)")
    tensors: int
    dtypes: list[str] = Field(description="storage dtypes as the header names them, sorted")
    storage: str = Field(description='in words, e.g. "packed 4-bit, compressed-tensors, group 32"')


class DecodeBytes(BaseModel):
    """What one decoded token reads from memory (weights only; the KV cache is not counted)."""

    bytes_per_token: int = Field(description="body + output projection + embedding rows + other")
    body: int = Field(description="the transformer body, read in full every token")
    output_projection: int = Field(description="the output (lm_head) matrix, read in full")
    output_projection_from: str = Field(
        description="lm_head | the input embedding (tied) | none found"
    )
    embedding_rows: int = Field(description="one row of each input and per-layer embedding")
    other: int = Field(description="tensors of no known role, counted as read in full")
    not_read: int = Field(
        description="bytes a text token does not read: the towers and the rest of the embeddings"
    )
    notes: list[str] = Field(default_factory=list)


class DecodeCeiling(BaseModel):
    """Memory bandwidth / bytes per token: the decode rate no single request can beat."""

    gpu: str | None = Field(None, description="the GPU whose bandwidth was used, if named")
    bandwidth_gb_s: float
    source: str = Field(description="where the bandwidth figure comes from")
    tokens_per_second: float


class GridCheck(BaseModel):
    """Whether sampled blocks of the body's weights sit on a 4-bit grid (a 16-bit QAT export)."""

    status: str = Field(description="on a 4-bit grid | off the grid | not applicable")
    on_grid: bool | None = Field(description="None when the check does not apply")
    reason: str
    block_size: int = 32
    blocks_checked: int = 0
    blocks_on_grid: int = 0
    levels_median: float | None = Field(
        None, description="median count of distinct values per block (at most 16 on the grid)"
    )
    tensors_sampled: list[str] = Field(default_factory=list)
    bytes_read: int = Field(0, description="bytes read from the weights for the check")


class CheckpointFacts(BaseModel):
    """One checkpoint: its tensor groups, the bytes a decoded token reads, and what follows."""

    source: str = Field(description="the source as given (never a token)")
    format: str = Field(description="safetensors | gguf")
    location: str = Field(description="the file, folder or Hub repository read")
    revision: str | None = Field(None, description="the Hub commit the header was read at")
    files: list[str] = Field(default_factory=list)
    total_bytes: int = Field(description="the tensors' bytes (headers excluded)")
    tensors: int
    quantization: str | None = Field(
        None, description="the quantization config.json declares, in words"
    )
    groups: list[TensorGroup]
    decode: DecodeBytes
    ceiling: DecodeCeiling | None = None
    grid_check: GridCheck | None = None
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(
        default_factory=list, description="what was read in the source's place, and why"
    )

    def group(self, name: str) -> TensorGroup | None:
        return next((group for group in self.groups if group.name == name), None)


class PredictedRatio(BaseModel):
    """A candidate's predicted decode speed relative to the reference (the first source)."""

    reference: str
    candidate: str
    ratio: float = Field(description="reference bytes per token / candidate bytes per token")


class InspectReport(BaseModel):
    checkpoints: list[CheckpointFacts]
    predicted_ratios: list[PredictedRatio] = Field(default_factory=list)
