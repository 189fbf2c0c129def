"""The Textual operator console. Imports ``engine``; never the reverse."""
