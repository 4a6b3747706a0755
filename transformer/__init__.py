"""Train, evaluate and use encoder-decoder Transformers for French-English translation.

The subpackages are layers; each imports only from those below it (the import-linter contracts in pyproject.toml,
which `make test` runs; docs/design.md draws them):
    cli | bench  >  serve | recipe | export | walkthrough  >  training  >  runs  >  decoding  >  fast_inference
    >  data | models  >  compute  >  core
"""
