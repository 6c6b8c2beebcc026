"""``python -m molrec_raw`` runs the command line."""
from molrec_raw.cli import main

raise SystemExit(main())
