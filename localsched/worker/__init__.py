"""The worker side: what runs where tasks run (``runtime.run_batch``)
and the layout of what it sends back (``records_wire``)."""
