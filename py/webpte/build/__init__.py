"""Build model folders offline (dev extra): `webpte build smollm2`.

Reading GGUF needs numpy + `gguf`; exporting needs torch + executorch. Both come with
`pip install -e '.[export]'` and are imported only when a build runs.
"""
