"""Reports: the campaign's figures for people (markdown now; HTML with plots and the timeline next)."""
