"""Export a trained checkpoint to other engines: CTranslate2 and Hugging Face MarianMT.

`weights.named_weights` is the one place that reads the model's tensors; the
format modules map those names onto each engine's layout.
"""
