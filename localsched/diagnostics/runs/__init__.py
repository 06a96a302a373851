"""One run's records as one object (``RunData``): saved as JSON, checked
when read back, exported as a trace, written all or nothing."""
