"""Token-level fidelity: does checkpoint B predict the same next tokens as checkpoint A?

- `records`: the `FidelityRecord` file (per prompt: tokens, top-k logprobs at every position);
- `llamacpp`, `vllm`: each engine's way to tokenize, answer greedily and score forced tokens;
- `detect`: which engine serves a URL;
- `collect`: `collect_fidelity`, A on its own answers, or B forced along A's;
- `divergence`: KL(A‖B) at one position from two top-k lists (the estimator and its bias);
- `compare`: `compare_fidelity` and `summary_lines` (pure);
- `cli`: `sagemeter fidelity collect|compare`.

Import from the submodules: `sagemeter.results` keeps a `FidelityRecord` in every result, so this
package's root must import nothing that imports the results back.
"""
