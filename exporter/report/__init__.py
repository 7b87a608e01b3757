"""``kuota report``: the weekly buy-versus-tune report read from Prometheus and the job history."""
