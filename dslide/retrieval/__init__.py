"""What the hash tables of a trained network retrieve, measured from outside the training loop: hash families side
by side on one network (`dslide lsh compare`) and a checkpoint's tables inspected (`dslide lsh inspect`).

Above the engine (these build a Network); dslide/lsh/ below it holds the families, the tables and their lifecycle.
"""
