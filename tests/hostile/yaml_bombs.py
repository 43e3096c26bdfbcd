"""YAML that costs more to expand than to send: the loaders' hostile input (dataplatform/yamlfile.py and its users)."""


def alias_bomb(levels: int, width: int = 9, last: str = "schema") -> str:
    """`levels` anchors, each a list of `width` aliases of the one before: width**levels nodes in a few hundred
    bytes (8 levels of 9: 43 million, in 362 bytes), the last named by `last`."""
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * width)}]" for n in range(1, levels)]
    return "\n".join([*lines, f"{last}: *a{levels - 1}"]) + "\n"

