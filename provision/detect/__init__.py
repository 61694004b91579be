"""Detection: probes (one command each), pure parsers, and the Facts model."""
