mod commands;
