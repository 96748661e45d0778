"""Images, audio and video in requests (``--mmproj``): where media bytes come from
(``sources``), what they are (``sniff``), how each protocol's media parts become markers in
the text (``content``), videos as frames and timestamps through ffmpeg (``video``), and the
projector's tokenization of text plus media, off the event loop (``prompt``)."""
