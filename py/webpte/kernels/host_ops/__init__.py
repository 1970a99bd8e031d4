"""Units for the ops a Gemma 4 method runs outside the catalog families: `arange` inside
delegates and the portable kernel calls ExecuTorch leaves between delegates."""
