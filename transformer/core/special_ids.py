"""The special token ids every vocabulary of this tool begins with: 0 = <pad>, 1 = <s> (BOS), 2 = </s> (EOS),
3 = <unk>. `data.tokenizer` trains SentencePiece to put them there; the models, the loss and the search read them
from here, without SentencePiece."""

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
