"""Operations on generations: promote, roll back, diff, retention, deletion."""
