"""What results mean: reads run directories only; never imports the runner, needs no server."""
