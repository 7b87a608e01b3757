"""The admission plane: the quota engine (pure), the simulator, the AdmissionReview server and the controller."""
