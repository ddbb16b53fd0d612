from camus.cli import main

raise SystemExit(main())
