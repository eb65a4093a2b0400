"""The parts of ``bench.quality.temporal_questions`` (its rules, the whole set and its
command line stay there): what every kind shares (``vocabulary``), the kinds that name a
time alone (``kinds``), topic and time (``topics``), and the independent check
(``check``)."""
