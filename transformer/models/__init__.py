"""The networks, plain PyTorch: the Transformer (`transformer`), Bahdanau's RNN (`rnn`), the attention kinds
(`attention/`), the decoder's cache, cheap dropout, the constructor of either family (`factory`) and what a search
needs from a model (`interface`). It may import `compute` and `core`; never the data layer."""
