"""`python -m transcript`: the command line."""

from transcript.cli import main

if __name__ == "__main__":
    main()
