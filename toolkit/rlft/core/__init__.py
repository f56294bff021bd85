"""Small shared pieces every stage uses: errors, atomic output folders, seeding, console."""
