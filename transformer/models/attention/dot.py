"""`dot`: scaled dot-product multi-head attention (Vaswani et al. 2017), the default.

softmax(QKᵀ/√d + mask)·V through `F.scaled_dot_product_attention`. Time O(T·S·d),
memory O(T·S) per head (less where SDPA's fused kernels apply). All three uses.
"""

import torch.nn.functional as F
from torch import Tensor

from transformer.models.attention.base import Attention
from transformer.models.attention.masks import combine, prefix_causal_mask


class DotAttention(Attention):
    """Scaled dot-product attention; the same module serves every use."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        t, s = q.size(2), k.size(2)
        if is_causal and t > 1 and t != s:  # prefix forcing into a cache: the new positions see no later ones
            mask, is_causal = combine(mask, prefix_causal_mask(t, s, q.device)), False
        elif is_causal and t == 1:  # one new position: the whole prefix is its past
            is_causal = False
        p = self.dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=is_causal)
