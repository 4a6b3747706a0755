"""Export a trained checkpoint to other engines: CTranslate2 and Hugging Face MarianMT.

`weights.named_weights` is the one place that reads the model's tensors; the format modules map those names onto each
engine's layout (running an export is `decoding.ctranslate2_engine`'s). It may import `runs` and every layer below it.
"""
