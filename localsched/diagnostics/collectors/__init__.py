"""The collectors: callbacks that gather records cheaply while a
computation runs, and the plain records they build on read."""
