"""Device-side sampling readouts (not graph ops): the best logits of a decoder's last row,
so a decode step reads back token ids instead of the whole vocabulary."""
