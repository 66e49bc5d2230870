#!/usr/bin/env python3
"""Doxygen input filter for cft's headers: placeholders written in angle
brackets in comments (<dir>.partial, rank<r>.safetensors) are shown as text,
not read as HTML tags (Doxygen already shows quoted text as written). Lines of the preprocessor are left alone."""
import re
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        if not line.lstrip().startswith("#"):
            parts = line.split('"')  # quoted text is shown as written
            for i in range(0, len(parts), 2):
                parts[i] = re.sub(r"<([A-Za-z_][^<>\n]*)>", r"\\<\1\\>", parts[i])
            line = '"'.join(parts)
        sys.stdout.write(line)
