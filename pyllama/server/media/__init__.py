"""Images and audio in requests (``--mmproj``): where media bytes come from (``sources``),
how each protocol's media parts become markers in the text (``content``), and the
projector's tokenization of text plus media, off the event loop (``prompt``)."""
