"""One PATCH-DOC message for a page's update, without walking the page.

Bokeh's ``patch_doc.create`` starts by making a reference for every model
of the document already in the browser (``Serializer(references=
doc.models.synced_references)``), so that the events can name them; an
update names a handful (the summary's Div, the task stream's source, a
range), while /status has about two hundred models: that walk was most of
what a small message cost the server thread (a few milliseconds on a busy
machine, for every message).  Here the references are made on demand: the
serializer asks for the models the events name, each looked up in a map of
the document's models by ``id`` (kept per document, rebuilt when its
models change).  What the message says, and which models count as sent
afterwards (``flush_synced``), is what bokeh's own ``create`` gives.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["patch_message"]

#: document -> (its models as last seen, {id(model): model})
_by_id: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _SyncedRefs(dict):
    """``id(model) -> its ref`` for the models already in the browser,
    made when the serializer first asks (its ``get`` and ``in``)."""

    def __init__(self, models: dict, new: set) -> None:
        super().__init__()
        self._models, self._new = models, new

    def _look(self, key) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        model = self._models.get(key)
        if model is None or model in self._new:
            return None
        ref = model.ref
        dict.__setitem__(self, key, ref)
        return ref

    def get(self, key, default=None):
        ref = self._look(key)
        return default if ref is None else ref

    def __contains__(self, key) -> bool:
        return self._look(key) is not None


def _models_by_id(doc) -> dict:
    manager = doc.models
    models = manager._models  # (bokeh's id -> model, of the whole document)
    cached = _by_id.get(doc)
    if cached is None or cached[0] != len(models) or cached[1] is not models:
        cached = (len(models), models, {id(m): m for m in models.values()})
        _by_id[doc] = cached
    return cached[2]


def patch_message(doc, events: list) -> Any:
    """The PATCH-DOC message of ``events`` (all of ``doc``), as bokeh's
    ``protocol.create("PATCH-DOC", events)`` would make it."""
    from bokeh.core.serialization import Serializer
    from bokeh.document.json import PatchJson
    from bokeh.protocol.messages.patch_doc import patch_doc

    manager = doc.models
    serializer = Serializer()
    serializer._references = _SyncedRefs(_models_by_id(doc), manager._new_models)
    content = PatchJson(events=serializer.encode(events))
    message = patch_doc(patch_doc.create_header(), {}, content)
    message.add_buffers(*serializer.buffers)
    # (last: a bokeh whose internals moved raises before anything is marked sent)
    manager.flush_synced(lambda model: not serializer.has_ref(model))
    return message
