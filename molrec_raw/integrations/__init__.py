"""Bridges to outside tools, one module per tool, each an optional extra; they use only the
record layer's public face, and importing one whose tool is missing raises an ImportError
naming the extra to install."""
