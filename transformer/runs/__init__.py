"""What a run leaves and how it is read back: the run folder (`run_folder`), checkpoints and the training state in
them, averaging, the results table, and `loading.load`, the one way to load a model to translate with. It may
import `decoding` and every layer below it."""
